import { JSON_HEADERS, type AlertMessage, type ChatTarget } from './alert-message.ts';

/**
 * ntfy (`https://ntfy.sh/<topic>` or a server of one's own): JSON publishing posts to the server's
 * root with the topic in the body; critical alarms go out at the highest priority.
 */
export const ntfy: ChatTarget = {
  request(url: string, m: AlertMessage) {
    const u = new URL(url);
    const parts = u.pathname.split('/').filter(Boolean);
    const topic = parts.pop() ?? '';
    u.pathname = `/${parts.join('/')}`;
    u.search = '';
    const priority = m.phase === 'resolved' ? 3 : m.severity === 'critical' ? 5 : 4;
    const tags =
      m.phase === 'resolved'
        ? ['white_check_mark']
        : m.severity === 'critical'
          ? ['rotating_light']
          : ['warning'];
    return {
      url: u.toString(),
      headers: JSON_HEADERS,
      body: JSON.stringify({ topic, title: m.title, message: m.text, priority, tags, click: m.url }),
    };
  },
};
