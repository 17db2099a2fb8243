import { createContext, type ComponentChildren } from 'preact';
import { useContext, useEffect, useState } from 'preact/hooks';
import { api, ApiError, onSignedOut } from './api.ts';
import { ErrorBox } from './components/ui.tsx';

export interface Me {
  id: string;
  name: string;
  created_at: string;
  users: { id: string; email: string; created_at: string }[];
}

interface SessionValue {
  /** The signed-in account, null when signed out, undefined while the first answer is awaited. */
  me: Me | null | undefined;
  refresh: () => Promise<void>;
  signOut: () => Promise<void>;
}

const SessionContext = createContext<SessionValue>({
  me: undefined,
  refresh: async () => {},
  signOut: async () => {},
});

export const useSession = () => useContext(SessionContext);

/** Knows whether a session exists (`GET /accounts/me`) and notices when an answer says it ended. */
export function SessionProvider({ children }: { children: ComponentChildren }) {
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const [failure, setFailure] = useState<ApiError | null>(null);
  const refresh = async () => {
    setFailure(null);
    try {
      setMe(await api.get<Me>('/accounts/me'));
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) setMe(null);
      else setFailure(e instanceof ApiError ? e : new ApiError(0, 'client', String(e)));
    }
  };
  useEffect(() => {
    void refresh();
    return onSignedOut(() => setMe(null));
  }, []);
  const signOut = async () => {
    try {
      await api.post('/auth/logout');
    } finally {
      setMe(null);
    }
  };
  if (failure && me === undefined) {
    return (
      <main id="main" class="sign-in">
        <h1>The dashboard cannot start</h1>
        <ErrorBox error={failure} />
        <button type="button" class="primary" onClick={() => void refresh()}>
          Try again
        </button>
      </main>
    );
  }
  return <SessionContext.Provider value={{ me, refresh, signOut }}>{children}</SessionContext.Provider>;
}
