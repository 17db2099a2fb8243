import { SMTPServer } from 'smtp-server';

/** A real SMTP server on 127.0.0.1 that keeps every message it receives, as raw RFC 5322 text. */
export interface TestSmtp {
  port: number;
  url: string;
  received: string[];
  close(): Promise<void>;
}

export async function startSmtpServer(): Promise<TestSmtp> {
  const received: string[] = [];
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, _session, done) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push(Buffer.concat(chunks).toString('utf8'));
        done();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', () => resolve()));
  const port = (smtp.server.address() as { port: number }).port;
  return {
    port,
    url: `smtp://127.0.0.1:${port}`,
    received,
    close: () => new Promise<void>((resolve) => smtp.close(() => resolve())),
  };
}
