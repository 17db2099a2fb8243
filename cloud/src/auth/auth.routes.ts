import type { Request, Response } from 'express';
import { z } from 'zod';
import { newSecret } from '../../../shared/ids.ts';
import { formatSeconds } from '../../../shared/time.ts';
import type { Config } from '../config.ts';
import { ApiError, Forbidden, InvalidRequest } from '../errors.ts';
import { userOf } from '../http/context.ts';
import { readCookie, SESSION_COOKIE } from '../http/credentials.ts';
import { isOwnOrigin, type RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import { PAGE_HEADERS } from '../pages/pages.static.ts';
import type { AuthService, NewSession } from './auth.service.ts';
import { confirmSignInPage } from './confirm-page.ts';
import {
  clearedSessionCookie,
  clearedSignInCookie,
  sessionCookie,
  SIGN_IN_COOKIE,
  signInCookie,
} from './cookie.ts';

const RequestCode = z.object({
  email: z.preprocess((v) => (typeof v === 'string' ? v.trim() : v), z.email().max(254)),
});
const VerifyCode = z.object({ email: z.string().max(254), code: z.string().min(1).max(32) });

function sessionBody(created: NewSession) {
  return {
    session_id: created.session.id,
    expires_at: formatSeconds(created.session.expires_at),
    user_id: created.session.user_id,
  };
}

/** The link's token from the callback's query (`t`): 400 `invalid_request` when missing. */
function linkToken(value: unknown): string {
  if (typeof value === 'string' && value.length > 0) return value;
  throw new InvalidRequest('invalid_request', 'the link is incomplete', [{ path: 't', message: 'required' }]);
}

/**
 * Who opens the link. A script that asks for JSON by name is signed in at once, as the API's users
 * script it. Anything else gets the confirm page unless it is the asking browser: a person's browser,
 * and also a mail scanner or a link preview (HEAD, or any type accepted), which must not spend the link
 * before its owner clicks it. What another site's page makes a browser fetch without navigating (an
 * image) is refused.
 */
function linkOpener(req: Request): 'script' | 'browser' {
  const site = req.get('Sec-Fetch-Site');
  const dest = req.get('Sec-Fetch-Dest');
  if (
    site !== undefined &&
    site !== 'same-origin' &&
    site !== 'none' &&
    dest !== undefined &&
    dest !== 'document'
  ) {
    throw new Forbidden(
      'forbidden',
      "a sign-in link opens in a browser window, not from another site's page",
    );
  }
  const asksForJson =
    req.method === 'GET' &&
    req.accepts(['html', 'json']) === 'json' &&
    /application\/(?:[\w.+-]+\+)?json/.test(req.get('Accept') ?? '');
  return asksForJson ? 'script' : 'browser';
}

/**
 * A form posted by a page of this origin: what the browser says of the request's site (Fetch
 * Metadata), else its `Origin`. A request that says neither is refused: every browser that posts a
 * form sends one of them.
 */
function requireSameOriginForm(req: Request, config: Config): void {
  const site = req.get('Sec-Fetch-Site');
  const origin = req.get('Origin');
  const same =
    site !== undefined ? site === 'same-origin' : origin !== undefined && isOwnOrigin(req, config, origin);
  if (!same)
    throw new Forbidden('forbidden', 'this form is accepted from the sign-in page of this site only');
}

/** What these routes use; the composition root passes them in. */
export interface AuthRoutesDeps {
  authService: AuthService;
  config: Config;
}

/** Human login by magic link (docs/api/auth.md). */
export function authRoutes(s: AuthRoutesDeps): RouteDef[] {
  const { authService, config } = s;

  /** Signed in by the link: the session cookie, the asking browser's cookie spent, on to the dashboard. */
  const signedIn = (res: Response, created: NewSession): undefined => {
    res.set('Cache-Control', 'no-store');
    res.append('Set-Cookie', [sessionCookie(config, created.secret), clearedSignInCookie()]);
    res.redirect(303, '/app/');
    return undefined;
  };

  /**
   * A used or expired link opened in a browser lands on the sign-in page saying so; a script gets
   * the error envelope.
   */
  const linkFailed = (req: Request, res: Response, e: unknown): undefined => {
    if (e instanceof ApiError && req.accepts(['json', 'html']) === 'html') {
      res.redirect(303, '/app/sign-in?link=invalid');
      return undefined;
    }
    throw e;
  };

  return [
    {
      method: 'post',
      path: '/v1/auth/request',
      auth: 'none',
      summary: 'E-mail a sign-in code and link (200 whether or not the e-mail is known)',
      requestBody: RequestCode,
      success: { status: 200, description: '{} whether or not the e-mail is known' },
      errors: ['invalid_request', 'rate_limited'],
      handler: async (req) => {
        const body = parseInput(RequestCode, req.body, 'body');
        // The asking browser's cookie: the mail's link signs that browser in without a question.
        const browser = newSecret('');
        await authService.requestCode(body.email, req.ip ?? 'unknown', browser);
        return { status: 200, body: {}, headers: { 'Set-Cookie': signInCookie(browser) } };
      },
    },
    {
      method: 'post',
      path: '/v1/auth/verify',
      auth: 'none',
      summary: 'Exchange the code for a session (sets the os_session cookie)',
      requestBody: VerifyCode,
      success: { status: 200, description: '{session_id, expires_at, user_id} and Set-Cookie: os_session' },
      errors: ['code_invalid', 'rate_limited'],
      handler: async (req) => {
        const body = parseInput(VerifyCode, req.body, 'body');
        const created = await authService.verifyCode(body.email, body.code, req.ip ?? 'unknown');
        return {
          status: 200,
          body: sessionBody(created),
          headers: { 'Set-Cookie': sessionCookie(config, created.secret), 'Cache-Control': 'no-store' },
        };
      },
    },
    {
      method: 'get',
      path: '/app/auth/callback',
      auth: 'none',
      summary:
        'The e-mailed link: sets the cookie and redirects to the dashboard; a browser that did not ask for the code confirms first',
      success: {
        status: 303,
        description:
          'sets the os_session cookie and redirects to /app/; 200 with a page asking to confirm the address in a browser that did not ask for the code',
      },
      errors: ['code_invalid', 'invalid_request'],
      handler: async (req, res) => {
        try {
          const t = linkToken(req.query.t);
          if (linkOpener(req) === 'script') return signedIn(res, await authService.verifyLink(t));
          const opened = await authService.openLink(t, readCookie(req.headers.cookie, SIGN_IN_COOKIE));
          if ('signedIn' in opened) return signedIn(res, opened.signedIn);
          res.status(200).set(PAGE_HEADERS).set('Cache-Control', 'no-store');
          res.type('html');
          res.send(confirmSignInPage(opened.confirm.email, t));
          return undefined;
        } catch (e) {
          return linkFailed(req, res, e);
        }
      },
    },
    {
      method: 'post',
      path: '/app/auth/callback',
      auth: 'none',
      body: 'raw',
      summary: "The confirm page's form: signs in with the e-mailed link's token (t, form-encoded)",
      success: { status: 303, description: 'sets the os_session cookie and redirects to /app/' },
      errors: ['code_invalid', 'invalid_request', 'forbidden'],
      handler: async (req, res) => {
        requireSameOriginForm(req, config);
        try {
          const form = new URLSearchParams(req.ctx.rawBody?.toString('utf8') ?? '');
          return signedIn(res, await authService.verifyLink(linkToken(form.get('t'))));
        } catch (e) {
          return linkFailed(req, res, e);
        }
      },
    },
    {
      method: 'post',
      path: '/v1/auth/logout',
      auth: 'none',
      summary: 'End this session and clear the cookie (204)',
      success: { status: 204, description: 'session ended, cookie cleared' },
      handler: async (req) => {
        const secret = readCookie(req.headers.cookie, SESSION_COOKIE);
        if (secret) await authService.logout(secret);
        return { status: 204, headers: { 'Set-Cookie': clearedSessionCookie(config) } };
      },
    },
    {
      method: 'post',
      path: '/v1/auth/logout-all',
      auth: 'session',
      summary: 'Sign out everywhere: end every session of this user (204)',
      success: { status: 204, description: 'every session of the user ended' },
      handler: async (req) => {
        await authService.logoutEverywhere(userOf(req.ctx));
        return { status: 204, headers: { 'Set-Cookie': clearedSessionCookie(config) } };
      },
    },
  ];
}
