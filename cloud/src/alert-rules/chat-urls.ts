import { InvalidRequest } from '../errors.ts';
import type { NotifyInput } from './alert-rules.body.ts';

/** What stands for the hidden part of a chat URL. */
const HIDDEN = '…';
/** A path shorter than this shows none of its characters (an ntfy topic like `/alarms`). */
const MIN_PATH_FOR_TAIL = 16;
const TAIL = 4;

/**
 * A chat URL as the API shows it: `https://hooks.slack.com/…XXXX`. A chat service's URL is its
 * credential (whoever has a Slack incoming-webhook URL or an ntfy topic can post to the channel), so
 * no answer and no audit entry holds it whole: the origin says which service, the last characters
 * of a long path tell two URLs apart.
 */
export function maskChatUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return HIDDEN;
  }
  const rest = `${parsed.pathname}${parsed.search}`;
  const tail = rest.length >= MIN_PATH_FOR_TAIL ? rest.slice(-TAIL) : '';
  return `${parsed.protocol}//${parsed.host}/${HIDDEN}${tail}`;
}

/** Whether a URL is a mask (as written, or as a URL parser percent-encodes it). */
function isMasked(url: string): boolean {
  return url.includes(HIDDEN) || url.toUpperCase().includes('%E2%80%A6');
}

function decoded(url: string): string {
  try {
    return decodeURI(url);
  } catch {
    return url;
  }
}

/** The rule's notification with every chat URL masked, as answers and audit entries show it. */
export function maskedNotify(notify: NotifyInput): NotifyInput {
  return {
    ...notify,
    steps: notify.steps.map((s) => ({ ...s, chat: s.chat.map((c) => ({ ...c, url: maskChatUrl(c.url) })) })),
  };
}

/**
 * The notification to store: a chat URL sent back as its mask (a client that read the rule and
 * writes it back) is the URL the rule has under that mask and type; a new URL replaces it. A mask
 * that matches none of the rule's URLs is 400 `invalid_request` naming the field: the whole URL is
 * needed.
 */
export function withStoredChatUrls(notify: NotifyInput, stored: NotifyInput | null): NotifyInput {
  const known = (stored?.steps ?? []).flatMap((s) => s.chat);
  return {
    ...notify,
    steps: notify.steps.map((step, i) => ({
      ...step,
      chat: step.chat.map((c, j) => {
        if (!isMasked(c.url)) return c;
        const given = decoded(c.url);
        const same = known.find((k) => k.type === c.type && maskChatUrl(k.url) === given);
        if (same) return { ...c, url: same.url };
        throw new InvalidRequest('invalid_request', 'a chat URL is shown masked; send the whole URL', [
          {
            path: `notify.steps.${i}.chat.${j}.url`,
            message: 'a masked URL that is not one of the rule’s: send the whole URL',
          },
        ]);
      }),
    })),
  };
}
