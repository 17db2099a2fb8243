import type { ChatTarget } from './alert-message.ts';
import { ntfy } from './chat-ntfy.ts';
import { slack } from './chat-slack.ts';
import { teams } from './chat-teams.ts';

/** The chat services an alert rule can notify, by the `type` its body names. */
export const CHAT_TARGETS: Record<'slack' | 'teams' | 'ntfy', ChatTarget> = { slack, teams, ntfy };
