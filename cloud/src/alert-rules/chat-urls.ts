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

/** A URL as a person reads it: percent-escapes decoded where they can be. */
function decoded(url: string): string {
  try {
    return decodeURI(url);
  } catch {
    return url;
  }
}

/** Whether a URL is a mask (as written, or as a URL parser percent-encodes it). */
function isMasked(url: string): boolean {
  return decoded(url).includes(HIDDEN);
}

/** The rule's notification with every chat URL masked, as answers and audit entries show it. */
export function maskedNotify(notify: NotifyInput): NotifyInput {
  const mask = (url: string) => (isMasked(url) ? url : maskChatUrl(url));
  return {
    ...notify,
    steps: notify.steps.map((s) => ({ ...s, chat: s.chat.map((c) => ({ ...c, url: mask(c.url) })) })),
  };
}

type Chat = NotifyInput['steps'][number]['chat'][number];

/**
 * The stored URL a masked one stands for: the one in the same place (step and position) when it
 * has that type and mask, else the only one of the rule with that type and mask. Two stored URLs
 * with one mask (two short ntfy topics on one server) are told apart by place only.
 */
function storedFor(given: Chat, place: Chat | undefined, known: readonly Chat[]): Chat | undefined {
  const same = (k: Chat) => k.type === given.type && decoded(maskChatUrl(k.url)) === decoded(given.url);
  if (place && same(place)) return place;
  const matches = known.filter(same);
  return new Set(matches.map((m) => m.url)).size === 1 ? matches[0] : undefined;
}

/**
 * The notification to store: a chat URL sent back as its mask (a client that read the rule and
 * writes it back) is the URL the rule has under that mask and type; a new URL replaces it. A mask
 * that stands for none of the rule's URLs, or for several in other places, is 400
 * `invalid_request` naming the field: the whole URL is needed.
 */
export function withStoredChatUrls(notify: NotifyInput, stored: NotifyInput | null): NotifyInput {
  const known = (stored?.steps ?? []).flatMap((s) => s.chat);
  return {
    ...notify,
    steps: notify.steps.map((step, i) => ({
      ...step,
      chat: step.chat.map((c, j) => {
        if (!isMasked(c.url)) return c;
        const found = storedFor(c, stored?.steps[i]?.chat[j], known);
        if (found) return { ...c, url: found.url };
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

/**
 * An audit entry's details with the chat URLs of the rules it holds masked (`before`, `after`):
 * entries written before chat URLs were masked hold them whole, and the audit trail is readable
 * with a `read` token.
 */
export function withMaskedRules(details: unknown): unknown {
  if (typeof details !== 'object' || details === null) return details;
  const out: Record<string, unknown> = { ...(details as Record<string, unknown>) };
  for (const key of ['before', 'after']) {
    const rule = out[key] as { notify?: NotifyInput } | null | undefined;
    if (rule && typeof rule === 'object' && Array.isArray(rule.notify?.steps)) {
      out[key] = { ...rule, notify: maskedNotify(rule.notify) };
    }
  }
  return out;
}
