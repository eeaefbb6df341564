/**
 * Reads literal values out of Python source without running it: top-level `name = <literal>` assignments (as in
 * nanoGPT's train.py and config/*.py files) and `--key=value` command-line overrides. Only constant expressions are
 * evaluated (numbers, strings, True/False/None, + - * / // % ** and parentheses), so a bundle can never make the
 * analysis execute anything; anything else is reported as a non-literal expression with its text.
 */

/** A Python constant as the analysis sees it: booleans keep Python's spelling (`True`/`False`), None is null. */
export type PythonValue = number | string | boolean | null;

/** One top-level assignment found in a file. */
export interface PythonAssignment {
  /** The assigned name. */
  readonly name: string;
  /** 1-based line number. */
  readonly line: number;
  /** The right-hand side as written (comment stripped). */
  readonly text: string;
  /** The evaluated constant, or undefined when the right-hand side is not a constant expression. */
  readonly value: PythonValue | undefined;
}

/** Top-level (unindented) `name = expr` and `name: type = expr` assignments, in file order. */
export function topLevelAssignments(source: string): PythonAssignment[] {
  const out: PythonAssignment[] = [];
  const lines = source.split(/\r?\n/);
  lines.forEach((raw, index) => {
    const line = stripComment(raw);
    // Indented lines belong to a block (function, class, if): not module-level defaults.
    const match = /^([A-Za-z_]\w*)\s*(?::\s*[A-Za-z_][\w.[\], ]*)?=(?!=)\s*(.+?)\s*$/.exec(line);
    if (!match?.[1] || match[2] === undefined) return;
    const text = match[2];
    out.push({ name: match[1], line: index + 1, text, value: evaluateLiteral(text) });
  });
  return out;
}

/** Removes a trailing `# comment`, leaving `#` inside string literals alone. */
export function stripComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = undefined;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '#') return line.slice(0, i).trimEnd();
  }
  return line.trimEnd();
}

type Token =
  | { kind: 'num'; value: number }
  | { kind: 'str'; value: string }
  | { kind: 'name'; value: string }
  | { kind: 'op'; value: string };

function tokenize(text: string): Token[] | undefined {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const rest = text.slice(i);
    const space = /^\s+/.exec(rest);
    if (space) {
      i += space[0].length;
      continue;
    }
    const num = /^(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?/.exec(rest);
    if (num) {
      const value = Number(num[0].replaceAll('_', ''));
      if (!Number.isFinite(value)) return undefined;
      tokens.push({ kind: 'num', value });
      i += num[0].length;
      continue;
    }
    const str = /^(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")/.exec(rest);
    if (str) {
      tokens.push({ kind: 'str', value: unescapePython(str[1] ?? str[2] ?? '') });
      i += str[0].length;
      continue;
    }
    const name = /^[A-Za-z_]\w*/.exec(rest);
    if (name) {
      tokens.push({ kind: 'name', value: name[0] });
      i += name[0].length;
      continue;
    }
    const op = /^(?:\*\*|\/\/|[-+*/%()])/.exec(rest);
    if (!op) return undefined;
    tokens.push({ kind: 'op', value: op[0] });
    i += op[0].length;
  }
  return tokens;
}

function unescapePython(body: string): string {
  return body.replace(/\\(.)/g, (_, c: string) => ({ n: '\n', t: '\t' })[c] ?? c);
}

/**
 * Evaluates a Python constant expression; undefined for anything that is not one (names, calls, conditionals,
 * f-strings, division by zero). Precedence follows Python: ** binds tighter than unary minus, which binds tighter
 * than * / // %, then + -.
 */
export function evaluateLiteral(text: string): PythonValue | undefined {
  const tokens = tokenize(text.trim());
  if (!tokens || tokens.length === 0) return undefined;
  let pos = 0;
  const peek = (): Token | undefined => tokens[pos];
  const isOp = (value: string): boolean => {
    const t = peek();
    return t?.kind === 'op' && t.value === value;
  };
  const fail = Symbol('fail');
  type Result = PythonValue | typeof fail;

  const atom = (): Result => {
    const t = tokens[pos++];
    if (!t) return fail;
    if (t.kind === 'num' || t.kind === 'str') {
      // Adjacent string literals concatenate, as in Python.
      if (t.kind === 'str') {
        let s = t.value;
        while (peek()?.kind === 'str') s += (tokens[pos++] as { value: string }).value;
        return s;
      }
      return t.value;
    }
    if (t.kind === 'name') {
      if (t.value === 'True') return true;
      if (t.value === 'False') return false;
      if (t.value === 'None') return null;
      return fail;
    }
    if (t.value === '(') {
      const inner = sum();
      if (!isOp(')')) return fail;
      pos++;
      return inner;
    }
    return fail;
  };
  const power = (): Result => {
    const base = atom();
    if (isOp('**')) {
      pos++;
      const exponent = unary();
      return arithmetic('**', base, exponent);
    }
    return base;
  };
  const unary = (): Result => {
    if (isOp('-') || isOp('+')) {
      const sign = (tokens[pos++] as { value: string }).value;
      const operand = unary();
      if (typeof operand !== 'number') return fail;
      return sign === '-' ? -operand : operand;
    }
    return power();
  };
  const product = (): Result => {
    let left = unary();
    while (isOp('*') || isOp('/') || isOp('//') || isOp('%')) {
      const op = (tokens[pos++] as { value: string }).value;
      left = arithmetic(op, left, unary());
    }
    return left;
  };
  const sum = (): Result => {
    let left = product();
    while (isOp('+') || isOp('-')) {
      const op = (tokens[pos++] as { value: string }).value;
      const right = product();
      left =
        typeof left === 'string' && typeof right === 'string' && op === '+'
          ? left + right
          : arithmetic(op, left, right);
    }
    return left;
  };
  const arithmetic = (op: string, a: Result, b: Result): Result => {
    if (typeof a !== 'number' || typeof b !== 'number') return fail;
    switch (op) {
      case '+':
        return a + b;
      case '-':
        return a - b;
      case '*':
        return a * b;
      case '/':
        return b === 0 ? fail : a / b;
      case '//':
        return b === 0 ? fail : Math.floor(a / b);
      case '%':
        return b === 0 ? fail : a - b * Math.floor(a / b);
      case '**':
        return a ** b;
      default:
        return fail;
    }
  };

  const result = sum();
  if (result === fail || pos !== tokens.length) return undefined;
  if (typeof result === 'number' && !Number.isFinite(result)) return undefined;
  return result;
}

/** One `--key=value` argument, parsed the way nanoGPT's configurator does (a literal, else the raw string). */
export interface CommandOverride {
  readonly key: string;
  readonly value: PythonValue;
  /** Whether value is the Python constant the text evaluates to; false when it is the raw text, kept as a string. */
  readonly constant: boolean;
  /** The argument as given, e.g. `--n_layer=6`: the source shown to users. */
  readonly arg: string;
}

/** Parses `--key=value`; undefined for anything else. */
export function parseOverride(arg: string): CommandOverride | undefined {
  const match = /^--([A-Za-z_]\w*)=(.*)$/s.exec(arg);
  if (!match?.[1] || match[2] === undefined) return undefined;
  const literal = evaluateLiteral(match[2]);
  return literal === undefined
    ? { key: match[1], value: match[2], constant: false, arg }
    : { key: match[1], value: literal, constant: true, arg };
}
