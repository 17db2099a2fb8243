import { liveLabel, type LiveStatus as Status } from '../live.ts';

/** Whether the page is updating live, for a page's head; announced politely when it changes. */
export function LiveStatus({ status }: { status: Status }) {
  return (
    <span class={`live-status live-${status}`} role="status" aria-live="polite">
      <span aria-hidden="true">{status === 'live' ? '◉' : '◌'}</span> {liveLabel(status)}
    </span>
  );
}
