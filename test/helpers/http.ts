/** A small fetch wrapper for tests: real sockets, answers parsed, headers at hand. */
export interface Answer {
  status: number;
  headers: Headers;
  text: string;

  json: any;
  cookie(name: string): string | null;
}

export interface CallOptions {
  token?: string;
  cookie?: string;
  headers?: Record<string, string>;
  /** A raw body sent as is (otherwise `body` is JSON-encoded). */
  raw?: string | Buffer;
}

/** Sees every answer (test/helpers/cloud.ts records the secrets and error bodies for its leak check). */
export type AnswerObserver = (method: string, path: string, answer: Answer) => void;

export class HttpClient {
  constructor(
    readonly baseUrl: string,
    private readonly observe?: AnswerObserver,
  ) {}

  async call(method: string, path: string, body?: unknown, options: CallOptions = {}): Promise<Answer> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (options.cookie) headers.cookie = options.cookie;
    let payload: string | Buffer | undefined;
    if (options.raw !== undefined) payload = options.raw;
    else if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(this.baseUrl + path, { method, headers, body: payload, redirect: 'manual' });
    const text = await response.text();
    let json: unknown = null;
    if (text && response.headers.get('content-type')?.includes('json')) json = JSON.parse(text);
    const answer: Answer = {
      status: response.status,
      headers: response.headers,
      text,
      json,
      cookie(name: string) {
        for (const c of response.headers.getSetCookie()) {
          const [pair] = c.split(';');
          const eq = pair!.indexOf('=');
          if (pair!.slice(0, eq) === name) return decodeURIComponent(pair!.slice(eq + 1));
        }
        return null;
      },
    };
    this.observe?.(method, path, answer);
    return answer;
  }

  get(path: string, options?: CallOptions): Promise<Answer> {
    return this.call('GET', path, undefined, options);
  }

  post(path: string, body?: unknown, options?: CallOptions): Promise<Answer> {
    return this.call('POST', path, body, options);
  }

  patch(path: string, body?: unknown, options?: CallOptions): Promise<Answer> {
    return this.call('PATCH', path, body, options);
  }

  delete(path: string, options?: CallOptions): Promise<Answer> {
    return this.call('DELETE', path, undefined, options);
  }
}
