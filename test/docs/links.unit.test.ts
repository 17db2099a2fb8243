import { describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from '../helpers/process.ts';

/**
 * The repository stands alone: a clone has nothing beside it, so every link in the README and the
 * docs resolves to a file of the repository (and a `#heading` to a heading of that file).
 */
function markdownFiles(): string[] {
  const top = ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md'].map((f) => path.join(ROOT, f));
  const walk = (dir: string): string[] =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) return walk(full);
      return e.name.endsWith('.md') ? [full] : [];
    });
  return [...top.filter((f) => fs.existsSync(f)), ...walk(path.join(ROOT, 'docs'))];
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N} -]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(file: string): Set<string> {
  const text = fs.readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1]!)));
}

function linksOf(file: string): string[] {
  const text = fs
    .readFileSync(file, 'utf8')
    .replace(/```[\s\S]*?```/g, '')
    .replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

describe('links in README.md and docs/', () => {
  const files = markdownFiles();

  it('finds the documents', () => {
    expect(files.map((f) => path.relative(ROOT, f))).toEqual(
      expect.arrayContaining(['README.md', 'CONTRIBUTING.md', 'docs/architecture.md', 'docs/api.md']),
    );
  });

  it.each(files.map((f) => [path.relative(ROOT, f)]))(
    '%s: every link resolves inside the repository',
    (rel) => {
      const file = path.join(ROOT, rel);
      const broken: string[] = [];
      for (const link of linksOf(file)) {
        if (/^(https?:|mailto:)/.test(link)) continue;
        const [target, anchor] = link.split('#') as [string, string | undefined];
        const resolved = target === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(target));
        if (path.relative(ROOT, resolved).startsWith('..')) {
          broken.push(`${link} (outside the repository)`);
          continue;
        }
        if (!fs.existsSync(resolved)) {
          broken.push(`${link} (no such file)`);
          continue;
        }
        if (anchor && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor)) {
          broken.push(`${link} (no such heading)`);
        }
      }
      expect(broken).toEqual([]);
    },
  );
});
