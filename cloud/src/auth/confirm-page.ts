import { escapeHtml } from '../../../shared/html.ts';

/**
 * The page the mail's link shows in a browser that did not ask for the code (docs/api/auth.md):
 * the address it signs in as, and a button that posts the link's token back. Signing in takes that
 * click, so a link from someone else's mail cannot sign a person into a stranger's account unawares.
 * Served with the dashboard's page headers (no framing, no Referer, forms to this origin only).
 */
export function confirmSignInPage(email: string, linkToken: string): string {
  const who = escapeHtml(email);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in as ${who}?</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1b1f24; background: #f6f7f9; }
  main { max-width: 32rem; margin: 12vh auto; padding: 1.5rem; background: #fff; border-radius: 8px;
         box-shadow: 0 1px 3px rgba(0,0,0,.15); }
  h1 { font-size: 1.4rem; margin-top: 0; overflow-wrap: anywhere; }
  button { font: inherit; padding: .6rem 1.2rem; min-height: 44px; border: 0; border-radius: 6px;
           background: #0b5cad; color: #fff; cursor: pointer; }
  button:focus-visible, a:focus-visible { outline: 3px solid #f5a623; outline-offset: 2px; }
  a { color: #0b5cad; display: inline-block; min-height: 44px; line-height: 44px; margin-left: 1rem; }
</style>
</head>
<body>
<main id="main">
<h1>Sign in as ${who}?</h1>
<p>This sign-in link was opened in a browser other than the one that asked for it.
Continue only if you asked for it yourself and <strong>${who}</strong> is your address:
a link someone else sent you would sign you in to their account.</p>
<form method="post" action="/app/auth/callback">
<input type="hidden" name="t" value="${escapeHtml(linkToken)}">
<button type="submit">Sign in as ${who}</button><a href="/app/sign-in">Cancel</a>
</form>
</main>
</body>
</html>
`;
}
