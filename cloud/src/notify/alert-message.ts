/**
 * An alert-rule notification as every target renders it (mail, chat webhooks): what happened, how
 * bad, and where to look. Targets live one per file beside this one (`chat-*.ts`).
 */
export interface AlertMessage {
  /** `opened`: the first notice of a step; `reminder`: a repeat; `resolved`: the alarm ended. */
  phase: 'opened' | 'reminder' | 'resolved';
  severity: 'warning' | 'critical';
  /** One line, e.g. `CRITICAL: Freezer above 8 °C at Kitchen`. */
  title: string;
  /** A few lines of detail. */
  text: string;
  /** The event in the web app. */
  url: string;
}

/** An HTTP request a chat service accepts as it is. */
export interface ChatRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** One chat service: how an alert message becomes a request to the webhook URL the user gave. */
export interface ChatTarget {
  request(url: string, message: AlertMessage): ChatRequest;
}

export const JSON_HEADERS = { 'content-type': 'application/json' };
