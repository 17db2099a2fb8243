import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

/**
 * The second step of a destructive action: the question, the action, and a way back. Focus moves
 * to the way back, so a keyboard user lands on the safe choice (the button they pressed is gone).
 * Inline (the default) it stands in a row of actions; `stacked`, the question is a paragraph above
 * the buttons and a live region, so screen readers hear it. `children` follow the buttons (an error).
 */
export function Confirm(props: {
  question: ComponentChildren;
  /** The group's accessible name; without it, the question (which must then be text). */
  label?: string;
  yes: string;
  no?: string;
  busy: boolean;
  stacked?: boolean;
  onYes: () => void;
  onNo: () => void;
  children?: ComponentChildren;
}) {
  const back = useRef<HTMLButtonElement>(null);
  useEffect(() => back.current?.focus(), []);
  const label = props.label ?? (typeof props.question === 'string' ? props.question : undefined);
  return (
    <div class={props.stacked ? 'confirm' : 'row-actions'} role="group" aria-label={label}>
      {props.stacked ? <p role="status">{props.question}</p> : <span>{props.question}</span>}
      <button type="button" class="danger" disabled={props.busy} onClick={props.onYes}>
        {props.yes}
      </button>{' '}
      <button type="button" ref={back} onClick={props.onNo}>
        {props.no ?? 'Keep it'}
      </button>
      {props.children}
    </div>
  );
}
