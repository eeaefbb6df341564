/**
 * Reads literal values out of Python source without running it: top-level `name = <literal>` assignments (as in
 * nanoGPT's train.py and config/*.py files), the top-level statements that pull another file's assignments in
 * (`exec(open('config/base.py').read())`, `from config.base import *`), and `--key=value` command-line overrides.
 * Only constant expressions are evaluated (numbers in every Python spelling, strings, True/False/None, + - * / // % **
 * and parentheses), so a bundle can never make the analysis execute anything; anything else is reported as a
 * non-literal expression with its text.
 */

/** A Python constant as the analysis sees it: booleans keep Python's spelling (`True`/`False`), None is null. */
export type PythonValue = number | string | boolean | null;

/**
 * The Python type of a constant. JavaScript has one number type, so whether `64` or `64.0` was written is kept here:
 * configurators compare it with the default's type (nanoGPT asserts `type(attempt) == type(globals()[key])`; the
 * example trainer refuses a float for an int setting).
 */
export type PythonType = 'int' | 'float' | 'str' | 'bool' | 'NoneType';

/** A constant expression's value with its Python type. */
export interface PythonLiteral {
  readonly value: PythonValue;
  readonly type: PythonType;
}

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
  /** The constant's Python type; undefined with value. */
  readonly type: PythonType | undefined;
}

/**
 * Top-level (unindented) `name = expr` and `name: type = expr` assignments, in file order. An augmented assignment
 * (`max_iters *= 2`) is one whose value is not a literal: the name changes by what it held, which is reported, never
 * silently kept.
 */
export function topLevelAssignments(source: string): PythonAssignment[] {
  const out: PythonAssignment[] = [];
  codeLines(source).forEach((raw, index) => {
    const line = stripComment(raw);
    // Indented lines belong to a block (function, class, if): not module-level defaults.
    const augmented = /^([A-Za-z_]\w*)\s*(\*\*|\/\/|>>|<<|[-+*/%@&|^])=/.exec(line);
    if (augmented?.[1]) {
      out.push({ name: augmented[1], line: index + 1, text: line.trim(), value: undefined, type: undefined });
      return;
    }
    // The right-hand side is taken whole and trimmed after: a lazy match before `\s*$` backtracks over every space of
    // a long line, which a bundle could make take minutes.
    const match = /^([A-Za-z_]\w*)\s*(?::\s*[A-Za-z_][\w.[\], ]*)?=(?!=)(.*)$/.exec(line);
    const text = match?.[2]?.trim();
    if (!match?.[1] || !text) return;
    const literal = parseLiteral(text);
    out.push({ name: match[1], line: index + 1, text, value: literal?.value, type: literal?.type });
  });
  return out;
}

/**
 * The source's lines, each line that begins inside a triple-quoted string blanked: the text of a docstring or a
 * multi-line string (`NOTES = """`, then `max_iters = 10`, then `"""`) is not code.
 */
function codeLines(source: string): string[] {
  let triple: string | undefined;
  return source.split(/\r?\n/).map((line) => {
    const startsInside = triple !== undefined;
    let quote: string | undefined;
    for (let i = 0; i < line.length; i++) {
      const c = line[i];
      if (triple !== undefined) {
        if (c === '\\') i++;
        else if (line.startsWith(triple, i)) {
          i += 2;
          triple = undefined;
        }
      } else if (quote !== undefined) {
        if (c === '\\') i++;
        else if (c === quote) quote = undefined;
      } else if (c === '#') {
        break;
      } else if (line.startsWith('"""', i) || line.startsWith("'''", i)) {
        triple = line.slice(i, i + 3);
        i += 2;
      } else if (c === '"' || c === "'") {
        quote = c;
      }
    }
    return startsInside ? '' : line;
  });
}

/**
 * A top-level statement that runs another file's top-level code into this file's names: `exec(open('path').read())`
 * (the way nanoGPT's train.py runs configurator.py and its config files, relative to the working directory) or
 * `from module import *` (found through sys.path, whose first entry is the entry script's directory).
 */
export interface PythonInclude {
  /** 1-based line number. */
  readonly line: number;
  readonly kind: 'exec' | 'import';
  /** The path exec opens, or the dotted module name. */
  readonly target: string;
  /** The statement as written (comment stripped). */
  readonly text: string;
}

/** Top-level `exec(open('<literal path>').read())` and `from <module> import *` statements, in file order. */
export function topLevelIncludes(source: string): PythonInclude[] {
  const out: PythonInclude[] = [];
  codeLines(source).forEach((raw, index) => {
    // Indented lines run only when their block does (nanoGPT's configurator execs its config files in a loop; those
    // come from the command and are read as config files).
    const line = stripComment(raw);
    const exec = /^exec\(\s*open\(\s*(?:'([^'\\]+)'|"([^"\\]+)")\s*(?:,[^()]*)?\)\s*\.read\(\s*\)\s*\)\s*;?$/.exec(
      line,
    );
    const path = exec?.[1] ?? exec?.[2];
    if (path !== undefined) {
      out.push({ line: index + 1, kind: 'exec', target: path, text: line });
      return;
    }
    const star = /^from\s+([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s+import\s+\*\s*;?$/.exec(line);
    if (star?.[1]) out.push({ line: index + 1, kind: 'import', target: star[1], text: line });
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
  | { kind: 'num'; value: number; float: boolean }
  | { kind: 'str'; value: string }
  | { kind: 'name'; value: string }
  | { kind: 'op'; value: string };

// Python's numeric literals (Language Reference, 2.4.5-2.4.6): an underscore may only sit between two digits; a
// decimal integer has no leading zero (`012` is a syntax error, so literal_eval refuses it and a configurator keeps
// the text); integers may be hexadecimal, octal or binary. Imaginary literals (`3j`) are not numbers here.
const DIGITS = String.raw`\d(?:_?\d)*`;
const INTEGER = /^(?:0[xX](?:_?[\da-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|[1-9](?:_?\d)*|0(?:_?0)*)/;
const FLOAT = new RegExp(
  String.raw`^(?:(?:(?:${DIGITS})?\.${DIGITS}|${DIGITS}\.)(?:[eE][+-]?${DIGITS})?|${DIGITS}[eE][+-]?${DIGITS})`,
);

/** A numeric literal at the start of text, with its length; undefined when text does not start with one. */
function numberAt(text: string): { value: number; float: boolean; length: number } | undefined {
  const float = FLOAT.exec(text);
  if (float) return { value: Number(float[0].replaceAll('_', '')), float: true, length: float[0].length };
  const integer = INTEGER.exec(text);
  if (!integer) return undefined;
  const digits = integer[0].replaceAll('_', '');
  // Number() reads 0x and 0o and 0b; it would read a decimal with leading zeros (`00`) too, which Python allows.
  return { value: Number(digits), float: false, length: integer[0].length };
}

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
    if (/^\.?\d/.test(rest)) {
      const num = numberAt(rest);
      // A number runs into a letter, digit or dot only when it is not one (`5k`, `012`, `1__0`, `0x`, `3j`).
      if (!num || /^[\w.]/.test(rest.slice(num.length))) return undefined;
      if (!Number.isFinite(num.value)) return undefined;
      tokens.push({ kind: 'num', value: num.value, float: num.float });
      i += num.length;
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
  return parseLiteral(text)?.value;
}

/**
 * Evaluates a Python constant expression as evaluateLiteral does, keeping its Python type: as in Python, arithmetic
 * on two ints is an int except `/` and a negative power, and anything with a float is a float.
 */
export function parseLiteral(text: string): PythonLiteral | undefined {
  const tokens = tokenize(text.trim());
  if (!tokens || tokens.length === 0) return undefined;
  let pos = 0;
  const peek = (): Token | undefined => tokens[pos];
  const isOp = (value: string): boolean => {
    const t = peek();
    return t?.kind === 'op' && t.value === value;
  };
  const fail = Symbol('fail');
  type Result = PythonLiteral | typeof fail;
  const isNumber = (r: Result): r is PythonLiteral & { value: number } =>
    r !== fail && (r.type === 'int' || r.type === 'float');

  const atom = (): Result => {
    const t = tokens[pos++];
    if (!t) return fail;
    if (t.kind === 'num') return { value: t.value, type: t.float ? 'float' : 'int' };
    if (t.kind === 'str') {
      // Adjacent string literals concatenate, as in Python.
      let s = t.value;
      while (peek()?.kind === 'str') s += (tokens[pos++] as { value: string }).value;
      return { value: s, type: 'str' };
    }
    if (t.kind === 'name') {
      if (t.value === 'True') return { value: true, type: 'bool' };
      if (t.value === 'False') return { value: false, type: 'bool' };
      if (t.value === 'None') return { value: null, type: 'NoneType' };
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
      if (!isNumber(operand)) return fail;
      return sign === '-' ? { value: -operand.value, type: operand.type } : operand;
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
        left !== fail && right !== fail && left.type === 'str' && right.type === 'str' && op === '+'
          ? { value: `${left.value}${right.value}`, type: 'str' }
          : arithmetic(op, left, right);
    }
    return left;
  };
  const arithmetic = (op: string, x: Result, y: Result): Result => {
    if (!isNumber(x) || !isNumber(y)) return fail;
    const a = x.value;
    const b = y.value;
    const ints = x.type === 'int' && y.type === 'int';
    const typed = (value: number, int = ints): Result => ({ value, type: int ? 'int' : 'float' });
    switch (op) {
      case '+':
        return typed(a + b);
      case '-':
        return typed(a - b);
      case '*':
        return typed(a * b);
      case '/':
        return b === 0 ? fail : typed(a / b, false);
      case '//':
        return b === 0 ? fail : typed(Math.floor(a / b));
      case '%':
        return b === 0 ? fail : typed(a - b * Math.floor(a / b));
      case '**':
        return typed(a ** b, ints && b >= 0);
      default:
        return fail;
    }
  };

  const result = sum();
  if (result === fail || pos !== tokens.length) return undefined;
  if (typeof result.value === 'number' && !Number.isFinite(result.value)) return undefined;
  return result;
}

/** One `--key=value` argument, parsed the way nanoGPT's configurator does (a literal, else the raw string). */
export interface CommandOverride {
  readonly key: string;
  readonly value: PythonValue;
  /** Whether value is the Python constant the text evaluates to; false when it is the raw text, kept as a string. */
  readonly constant: boolean;
  /** The value's Python type (`str` for raw text). */
  readonly type: PythonType;
  /** The argument as given, e.g. `--n_layer=6`: the source shown to users. */
  readonly arg: string;
}

/** Parses `--key=value`; undefined for anything else. */
export function parseOverride(arg: string): CommandOverride | undefined {
  const match = /^--([A-Za-z_]\w*)=(.*)$/s.exec(arg);
  if (!match?.[1] || match[2] === undefined) return undefined;
  const literal = parseLiteral(match[2]);
  return literal === undefined
    ? { key: match[1], value: match[2], constant: false, type: 'str', arg }
    : { key: match[1], value: literal.value, constant: true, type: literal.type, arg };
}
