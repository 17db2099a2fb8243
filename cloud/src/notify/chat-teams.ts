import { JSON_HEADERS, type AlertMessage, type ChatTarget } from './alert-message.ts';

/**
 * Microsoft Teams webhooks (a "Post to a channel when a webhook request is received" workflow, which
 * replaced the Office 365 connectors): a message with one Adaptive Card attachment.
 */
export const teams: ChatTarget = {
  request(url: string, m: AlertMessage) {
    const color = m.phase === 'resolved' ? 'Good' : m.severity === 'critical' ? 'Attention' : 'Warning';
    return {
      url,
      headers: JSON_HEADERS,
      body: JSON.stringify({
        type: 'message',
        attachments: [
          {
            contentType: 'application/vnd.microsoft.card.adaptive',
            contentUrl: null,
            content: {
              $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
              type: 'AdaptiveCard',
              version: '1.4',
              body: [
                { type: 'TextBlock', text: m.title, weight: 'Bolder', size: 'Medium', color, wrap: true },
                { type: 'TextBlock', text: m.text, wrap: true },
              ],
              actions: [{ type: 'Action.OpenUrl', title: 'Open the event', url: m.url }],
            },
          },
        ],
      }),
    };
  },
};
