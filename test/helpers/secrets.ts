/**
 * The "secrets never logged" check every test cloud runs when it stops (test/helpers/cloud.ts): no
 * plaintext secret may appear in a captured log line or in an error body the cloud answered.
 *
 * A secret is found two ways. By its shape: every token the cloud issues carries a prefix
 * (`ua_live_`, `ds_live_`, `whk_`, `whsec_`, the session cookie's `oss_`, a report recipient's
 * link's `rcp_`), and a private key is a PEM block, so any such value is caught whether or not a
 * test saw it being issued. By its value: the
 * secrets with no prefix (sign-in codes, magic-link tokens) are recorded from the mails the cloud
 * sends, and every secret-shaped value in its answers is recorded too.
 */

/** Prefixed secrets (at least 16 base62 characters after the prefix) and PEM private keys. */
const SECRET_SHAPES =
  /(?:ua_live_|ds_live_|whk_|whsec_|oss_|rcp_)[0-9A-Za-z]{16,}|-----BEGIN [A-Z ]*PRIVATE KEY-----/g;

export interface Leak {
  where: string;
  secret: string;
}

/** The issued secrets seen so far and the error bodies the cloud answered. */
export class SecretWatch {
  readonly issued = new Set<string>();
  readonly errorBodies: { where: string; text: string }[] = [];

  /** Records the secrets a mail carries: its sign-in code and its magic-link token. */
  recordMail(mail: { subject: string; text: string }): void {
    const code = /sign-in code: ([A-Z0-9]{3}-[A-Z0-9]{3})/.exec(mail.subject + '\n' + mail.text);
    if (code) {
      this.issued.add(code[1]!);
      this.issued.add(code[1]!.replace('-', ''));
    }
    const link = /\/app\/auth\/callback\?t=([0-9A-Za-z]+)/.exec(mail.text);
    if (link) this.issued.add(link[1]!);
  }

  /** Records an answer: the secrets it hands out, and its body when it is an error. */
  recordAnswer(method: string, path: string, status: number, text: string, setCookies: string[]): void {
    for (const match of text.matchAll(SECRET_SHAPES)) this.issued.add(match[0]);
    for (const cookie of setCookies) {
      const value = /^[^=]+=([^;]*)/.exec(cookie)?.[1];
      if (value && value.length >= 16) this.issued.add(decodeURIComponent(value));
    }
    if (status >= 400) this.errorBodies.push({ where: `${method} ${path} -> ${status}`, text });
  }

  /** Every secret found in the log lines or in the error bodies. */
  leaks(logs: Record<string, unknown>[]): Leak[] {
    const found: Leak[] = [];
    const scan = (where: string, text: string) => {
      for (const match of text.matchAll(SECRET_SHAPES)) found.push({ where, secret: match[0] });
      for (const secret of this.issued) if (text.includes(secret)) found.push({ where, secret });
    };
    logs.forEach((line, i) =>
      scan(`log line ${i}: ${String(line.msg)}`, JSON.stringify(withoutOutboxSubject(line))),
    );
    for (const body of this.errorBodies) scan(`error body of ${body.where}`, body.text);
    return found;
  }
}

/**
 * Without SMTP the cloud logs each outbox mail's subject, sign-in code included, on purpose: that is
 * how the operator of a one-machine install signs in (docs/api/auth.md). That one field is the
 * documented exception; the rest of that line is checked like any other.
 */
function withoutOutboxSubject(line: Record<string, unknown>): Record<string, unknown> {
  if (line.msg !== 'mail written to outbox') return line;
  const { subject: _subject, ...rest } = line;
  return rest;
}

/** A short, safe description of leaks for a failure message (each secret cut to its first characters). */
export function describeLeaks(leaks: Leak[]): string {
  return leaks.map((l) => `${l.where}: ${l.secret.slice(0, 12)}…`).join('\n');
}
