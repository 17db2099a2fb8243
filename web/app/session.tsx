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
  /** Ends this browser's session; when the cloud cannot be told, the session holds and `signOutError` says so. */
  signOut: () => Promise<void>;
  /** Why the last sign-out failed (the session is still valid), null otherwise. */
  signOutError: ApiError | null;
}

const SessionContext = createContext<SessionValue>({
  me: undefined,
  refresh: async () => {},
  signOut: async () => {},
  signOutError: null,
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
  const [signOutError, setSignOutError] = useState<ApiError | null>(null);
  // Only an answer that the session is over shows the sign-in page: on a shared computer, a
  // sign-out that did not reach the cloud leaves the session valid, and the person must know.
  const signOut = async () => {
    setSignOutError(null);
    try {
      await api.post('/auth/logout');
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) {
        setSignOutError(e instanceof ApiError ? e : new ApiError(0, 'client', String(e)));
        return;
      }
    }
    setMe(null);
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
  return (
    <SessionContext.Provider value={{ me, refresh, signOut, signOutError }}>
      {children}
    </SessionContext.Provider>
  );
}
