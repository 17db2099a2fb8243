import { useTitle } from '../hooks.ts';

export function NotFound() {
  useTitle('Not found');
  return (
    <>
      <h1>Page not found</h1>
      <p>
        There is no such page. <a href="/app/">Go to the overview</a>.
      </p>
    </>
  );
}
