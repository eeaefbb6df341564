/** The fixture projects under test/fixtures/projects, read the way a client sends them. */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { packTarGz, textFilesOf } from '../../lambdas/shared/tarball';

const PROJECTS = join(import.meta.dirname, '..', 'fixtures', 'projects');

function projectPaths(name: string): { root: string; paths: string[] } {
  const root = join(PROJECTS, name);
  return { root, paths: filesUnder(root) };
}

/** Every file under a folder, at any depth. */
function filesUnder(root: string): string[] {
  const paths: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else paths.push(path);
    }
  };
  walk(root);
  return paths;
}

/** A folder's files as the API keeps them for the analysis (its text files, by relative path: textFilesOf). */
export function textFilesUnder(root: string): Record<string, string> {
  return textFilesOf(filesUnder(root).map((path) => ({ path: relative(root, path), content: readFileSync(path) })));
}

/** A fixture project's files as a bundle (tar.gz). */
export function projectBundle(name: string): Buffer {
  const { root, paths } = projectPaths(name);
  return packTarGz(paths.map((path) => ({ path: relative(root, path), content: readFileSync(path) })));
}

/** A fixture project's text files by relative path (what POST /estimate and the analysis read). */
export function projectFiles(name: string): Record<string, string> {
  const { root, paths } = projectPaths(name);
  return Object.fromEntries(paths.map((path) => [relative(root, path), readFileSync(path, 'utf8')]));
}
