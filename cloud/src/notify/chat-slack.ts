import { JSON_HEADERS, type AlertMessage, type ChatTarget } from './alert-message.ts';

/**
 * Slack incoming webhooks (`https://hooks.slack.com/services/...`): `{text, blocks}`; `text` is the
 * notification's fallback, the section block the message as shown.
 */
export const slack: ChatTarget = {
  request(url: string, m: AlertMessage) {
    const icon =
      m.phase === 'resolved'
        ? ':white_check_mark:'
        : m.severity === 'critical'
          ? ':rotating_light:'
          : ':warning:';
    return {
      url,
      headers: JSON_HEADERS,
      body: JSON.stringify({
        text: `${m.title}`,
        blocks: [
          {
            type: 'section',
            text: { type: 'mrkdwn', text: `${icon} *${m.title}*\n${m.text}\n<${m.url}|Open the event>` },
          },
        ],
      }),
    };
  },
};
