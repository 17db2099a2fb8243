import { describe, expect, it } from '@jest/globals';
import { notificationAt, recipientsOf } from '../../../cloud/src/alert-rules/alert-escalation.ts';
import type { AlertMessage } from '../../../cloud/src/notify/alert-message.ts';
import { CHAT_TARGETS } from '../../../cloud/src/notify/chat-targets.ts';

/** The chat targets' request shapes and the escalation chain's timing (pure). */
const message: AlertMessage = {
  phase: 'opened',
  severity: 'critical',
  title: 'CRITICAL: Freezer temperature above -18 °C at Kitchen',
  text: 'Rule: Freezer\nPeak: -12 °C',
  url: 'https://app.example.com/app/events/evt_1',
};
const MINUTE = 60_000_000;

describe('chat targets', () => {
  it('posts Slack a text with a section block', () => {
    const r = CHAT_TARGETS.slack.request('https://hooks.slack.com/services/T/B/x', message);
    expect(r.url).toBe('https://hooks.slack.com/services/T/B/x');
    expect(r.headers['content-type']).toBe('application/json');
    expect(JSON.parse(r.body)).toEqual({
      text: message.title,
      blocks: [
        {
          type: 'section',
          text: { type: 'mrkdwn', text: expect.stringContaining(`<${message.url}|Open the event>`) },
        },
      ],
    });
  });

  it('posts Teams a message with one Adaptive Card', () => {
    const body = JSON.parse(
      CHAT_TARGETS.teams.request('https://prod.example.logic.azure.com/wf', message).body,
    );
    expect(body.type).toBe('message');
    expect(body.attachments).toHaveLength(1);
    expect(body.attachments[0].contentType).toBe('application/vnd.microsoft.card.adaptive');
    expect(body.attachments[0].content).toMatchObject({
      type: 'AdaptiveCard',
      body: [
        { type: 'TextBlock', text: message.title, color: 'Attention' },
        { type: 'TextBlock', text: message.text },
      ],
      actions: [{ type: 'Action.OpenUrl', url: message.url }],
    });
  });

  it('publishes to ntfy as JSON at the server root with the topic in the body', () => {
    const r = CHAT_TARGETS.ntfy.request('https://ntfy.example.com/kitchen-alarms', message);
    expect(r.url).toBe('https://ntfy.example.com/');
    expect(JSON.parse(r.body)).toEqual({
      topic: 'kitchen-alarms',
      title: message.title,
      message: message.text,
      priority: 5,
      tags: ['rotating_light'],
      click: message.url,
    });
    const resolved = JSON.parse(
      CHAT_TARGETS.ntfy.request('https://ntfy.sh/t', { ...message, phase: 'resolved' }).body,
    );
    expect(resolved.priority).toBe(3);
  });
});

describe('escalation timing', () => {
  const notify = {
    steps: [
      { after_min: 0, user_ids: ['usr_a'], webhook_ids: [], chat: [] },
      { after_min: 30, user_ids: ['usr_b'], webhook_ids: [], chat: [] },
    ],
    repeat_every_min: 20,
  };

  it('sends each step at its delay from the opening, then repeats after the last step', () => {
    expect([0, 1, 2, 3].map((n) => notificationAt(notify, 0, n))).toEqual([
      0,
      30 * MINUTE,
      50 * MINUTE,
      70 * MINUTE,
    ]);
    expect(notificationAt({ ...notify, repeat_every_min: null }, 0, 2)).toBeNull();
    expect(notificationAt({ steps: [], repeat_every_min: 5 }, 0, 0)).toBeNull();
  });

  it('sends a step to its own targets and a repeat to everyone the chain reached', () => {
    expect(recipientsOf(notify, 1).flatMap((s) => s.user_ids)).toEqual(['usr_b']);
    expect(recipientsOf(notify, 2).flatMap((s) => s.user_ids)).toEqual(['usr_a', 'usr_b']);
  });
});
