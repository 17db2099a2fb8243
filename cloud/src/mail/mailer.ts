import { EventEmitter } from 'node:events';
import fs from 'node:fs/promises';
import path from 'node:path';
import nodemailer, { type Transporter } from 'nodemailer';
import type { Logger } from '../logger.ts';

export interface MailAttachment {
  filename: string;
  content: Buffer;
  contentType: string;
}

export interface Mail {
  to: string;
  subject: string;
  text: string;
  /** Files sent with the mail (base64 MIME parts): a scheduled report's PDF. */
  attachments?: MailAttachment[];
  /** Header fields beyond the usual ones: a scheduled report's `List-Unsubscribe`. */
  headers?: Record<string, string>;
}

export interface SentMail extends Mail {
  /** The `.eml` file for outbox delivery, else null. */
  file: string | null;
  messageId: string;
}

/**
 * Sends mail through SMTP when `SMTP_URL` is set; otherwise writes each message as an RFC 5322 `.eml`
 * file to `$DATA_DIR/outbox/` and logs its subject (sign-in codes included), so a local install works
 * with no mail server (docs/api/auth.md). Both go through nodemailer, so both produce the same message.
 * Emits `sent` with a SentMail after each delivery.
 */
export class Mailer extends EventEmitter<{ sent: [SentMail] }> {
  private readonly transport: Transporter;
  private readonly outboxDir: string | null;

  constructor(private readonly deps: { smtpUrl: string | null; dataDir: string; from: string; log: Logger }) {
    super();
    if (deps.smtpUrl) {
      this.transport = nodemailer.createTransport(deps.smtpUrl);
      this.outboxDir = null;
    } else {
      this.transport = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
      this.outboxDir = path.join(deps.dataDir, 'outbox');
    }
  }

  async send(mail: Mail): Promise<SentMail> {
    const info = (await this.transport.sendMail({ from: this.deps.from, ...mail })) as {
      messageId: string;
      message?: Buffer;
    };
    let file: string | null = null;
    if (this.outboxDir) {
      await fs.mkdir(this.outboxDir, { recursive: true, mode: 0o700 });
      const stamp = new Date().toISOString().replace(/[:.]/g, '-');
      file = path.join(
        this.outboxDir,
        `${stamp}-${info.messageId.replace(/[^A-Za-z0-9]/g, '').slice(0, 24)}.eml`,
      );
      await fs.writeFile(file, info.message ?? Buffer.alloc(0), { mode: 0o600 });
      // The local outbox is the embedded default for one machine: its reader is the operator, and the
      // subject (a sign-in code's carrier) in the console saves opening the file.
      this.deps.log.info({ to: mail.to, subject: mail.subject, file }, 'mail written to outbox');
    } else {
      // Through SMTP the mail is the only carrier of its secrets: whoever reads the logs must not be
      // able to sign in as its recipient.
      this.deps.log.info({ to: mail.to, messageId: info.messageId }, 'mail sent');
    }
    const sent: SentMail = { ...mail, file, messageId: info.messageId };
    this.emit('sent', sent);
    return sent;
  }

  close(): void {
    this.transport.close();
  }
}
