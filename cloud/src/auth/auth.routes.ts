import { z } from 'zod';
import { formatSeconds } from '../../../shared/time.ts';
import type { Config } from '../config.ts';
import { ApiError, InvalidRequest } from '../errors.ts';
import { userOf } from '../http/context.ts';
import { readCookie, SESSION_COOKIE } from '../http/credentials.ts';
import type { RouteDef } from '../http/route-table.ts';
import { parseInput } from '../http/validate.ts';
import type { AuthService, NewSession } from './auth.service.ts';
import { clearedSessionCookie, sessionCookie } from './cookie.ts';

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

/** What these routes use; the composition root passes them in. */
export interface AuthRoutesDeps {
  authService: AuthService;
  config: Config;
}

/** Human login by magic link (docs/api/auth.md). */
export function authRoutes(s: AuthRoutesDeps): RouteDef[] {
  const { authService, config } = s;
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
        await authService.requestCode(body.email, req.ip ?? 'unknown');
        return { status: 200, body: {} };
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
      summary: 'The e-mailed link: sets the cookie and redirects to the dashboard',
      success: { status: 303, description: 'sets the os_session cookie and redirects to /app/' },
      errors: ['code_invalid', 'invalid_request'],
      handler: async (req, res) => {
        const t = req.query.t;
        let created;
        try {
          if (typeof t !== 'string' || t.length === 0) {
            throw new InvalidRequest('invalid_request', 'the link is incomplete', [
              { path: 't', message: 'required' },
            ]);
          }
          created = await authService.verifyLink(t);
        } catch (e) {
          // A person who opens a used or expired link in a browser gets the sign-in page saying
          // so; a script gets the error envelope.
          if (e instanceof ApiError && req.accepts(['json', 'html']) === 'html') {
            res.redirect(303, '/app/sign-in?link=invalid');
            return undefined;
          }
          throw e;
        }
        res.set({ 'Set-Cookie': sessionCookie(config, created.secret), 'Cache-Control': 'no-store' });
        res.redirect(303, '/app/');
        return undefined;
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
