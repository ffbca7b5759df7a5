import { assertNever } from '../decider';

/**
 * WHEN / ENABLED_WHEN / COMPLETE conditions over session variables (seed 001). The router
 * evaluates them before any model runs, so they are deterministic and pure.
 *
 * Grammar (keywords are case-insensitive; `//` outside quotes starts a comment to end of line):
 *
 *   expr       := and ( OR and )*
 *   and        := unary ( AND unary )*
 *   unary      := NOT unary | '(' expr ')' | test
 *   test       := name IS [NOT] SET | operand op operand
 *   op         := = | == | != | < | > | <= | >=
 *   operand    := name | number | "string" | 'string' | true | false | null
 *
 * Semantics: a variable is *set* when it is present and neither null nor "". A comparison with a
 * missing variable compares `undefined`: `x = ""` is false and `x != ""` is TRUE when x is missing
 * (seed 001: use IS NOT SET for empty checks). Ordering comparisons (< > <= >=) are false unless
 * both sides are numbers (numeric strings count) or both are strings.
 */

export type Operand = { kind: 'var'; name: string } | { kind: 'literal'; value: string | number | boolean | null };
export type ComparisonOp = '=' | '!=' | '<' | '>' | '<=' | '>=';

export type ConditionAst =
  | { kind: 'and'; left: ConditionAst; right: ConditionAst }
  | { kind: 'or'; left: ConditionAst; right: ConditionAst }
  | { kind: 'not'; inner: ConditionAst }
  | { kind: 'is_set'; name: string; negated: boolean }
  | { kind: 'compare'; op: ComparisonOp; left: Operand; right: Operand };

export type ParseConditionResult = { ok: true; ast: ConditionAst; variables: string[] } | { ok: false; message: string; offset: number };

type Token =
  | { t: 'name'; v: string; at: number }
  | { t: 'num'; v: number; at: number }
  | { t: 'str'; v: string; at: number }
  | { t: 'op'; v: ComparisonOp; at: number }
  | { t: 'lp' | 'rp'; at: number };

/** Remove `//` comments that are outside quotes (each to the end of its line). */
export function stripConditionComments(source: string): string {
  let out = '';
  let quote: string | null = null;
  for (let i = 0; i < source.length; i++) {
    const ch = source[i]!;
    if (quote !== null) {
      out += ch;
      if (ch === '\\' && i + 1 < source.length) {
        out += source[++i];
      } else if (ch === quote) quote = null;
      continue;
    }
    if (ch === '"' || ch === "'") {
      quote = ch;
      out += ch;
      continue;
    }
    if (ch === '/' && source[i + 1] === '/') {
      while (i < source.length && source[i] !== '\n') i++;
      out += '\n';
      continue;
    }
    out += ch;
  }
  return out;
}

function tokenize(source: string): { ok: true; tokens: Token[] } | { ok: false; message: string; offset: number } {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const ch = source[i]!;
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    if (ch === '(' || ch === ')') {
      tokens.push({ t: ch === '(' ? 'lp' : 'rp', at: i });
      i++;
      continue;
    }
    if (ch === '"' || ch === "'") {
      let j = i + 1;
      let text = '';
      while (j < source.length && source[j] !== ch) {
        if (source[j] === '\\' && j + 1 < source.length) j++;
        text += source[j];
        j++;
      }
      if (j >= source.length) return { ok: false, message: 'unterminated string', offset: i };
      tokens.push({ t: 'str', v: text, at: i });
      i = j + 1;
      continue;
    }
    const two = source.slice(i, i + 2);
    if (two === '!=' || two === '<=' || two === '>=' || two === '==') {
      tokens.push({ t: 'op', v: two === '==' ? '=' : (two as ComparisonOp), at: i });
      i += 2;
      continue;
    }
    if (ch === '=' || ch === '<' || ch === '>') {
      tokens.push({ t: 'op', v: ch, at: i });
      i++;
      continue;
    }
    const num = /^-?\d+(\.\d+)?/.exec(source.slice(i));
    if (num) {
      tokens.push({ t: 'num', v: Number(num[0]), at: i });
      i += num[0].length;
      continue;
    }
    const name = /^[A-Za-z_][A-Za-z0-9_.]*/.exec(source.slice(i));
    if (name) {
      tokens.push({ t: 'name', v: name[0], at: i });
      i += name[0].length;
      continue;
    }
    return { ok: false, message: `unexpected character '${ch}'`, offset: i };
  }
  return { ok: true, tokens };
}

class ConditionSyntaxError {
  constructor(
    readonly message: string,
    readonly offset: number,
  ) {}
}

const KEYWORDS = new Set(['and', 'or', 'not', 'is', 'set', 'true', 'false', 'null']);

/**
 * Parse a condition. Returns the AST and the variable names it reads, or the first syntax error
 * with its character offset (into the source with comments removed, which keeps offsets).
 */
export function parseCondition(source: string): ParseConditionResult {
  const lexed = tokenize(stripConditionComments(source));
  if (!lexed.ok) return lexed;
  const tokens = lexed.tokens;
  const variables = new Set<string>();
  let pos = 0;
  const peek = (): Token | undefined => tokens[pos];
  const isKw = (tok: Token | undefined, kw: string) => tok?.t === 'name' && tok.v.toLowerCase() === kw;
  const fail = (message: string): never => {
    throw new ConditionSyntaxError(message, peek()?.at ?? source.length);
  };

  const operand = (): Operand => {
    const tok = peek();
    if (tok === undefined) return fail('expected a variable or a value');
    pos++;
    switch (tok.t) {
      case 'num':
        return { kind: 'literal', value: tok.v };
      case 'str':
        return { kind: 'literal', value: tok.v };
      case 'name': {
        const lower = tok.v.toLowerCase();
        if (lower === 'true' || lower === 'false') return { kind: 'literal', value: lower === 'true' };
        if (lower === 'null') return { kind: 'literal', value: null };
        if (KEYWORDS.has(lower)) return fail(`unexpected keyword '${tok.v}'`);
        variables.add(tok.v);
        return { kind: 'var', name: tok.v };
      }
      default:
        pos--;
        return fail('expected a variable or a value');
    }
  };

  const test = (): ConditionAst => {
    const first = peek();
    if (first?.t === 'name' && !KEYWORDS.has(first.v.toLowerCase()) && isKw(tokens[pos + 1], 'is')) {
      pos += 2;
      let negated = false;
      if (isKw(peek(), 'not')) {
        negated = true;
        pos++;
      }
      if (!isKw(peek(), 'set')) fail('expected SET after IS / IS NOT');
      pos++;
      variables.add(first.v);
      return { kind: 'is_set', name: first.v, negated };
    }
    const left = operand();
    const op = peek();
    if (op?.t !== 'op') return fail('expected a comparison (=, !=, <, >, <=, >=) or IS [NOT] SET');
    pos++;
    const right = operand();
    return { kind: 'compare', op: op.v, left, right };
  };

  const unary = (): ConditionAst => {
    if (isKw(peek(), 'not')) {
      pos++;
      return { kind: 'not', inner: unary() };
    }
    if (peek()?.t === 'lp') {
      pos++;
      const inner = expr();
      if (peek()?.t !== 'rp') fail("expected ')'");
      pos++;
      return inner;
    }
    return test();
  };

  const and = (): ConditionAst => {
    let left = unary();
    while (isKw(peek(), 'and')) {
      pos++;
      left = { kind: 'and', left, right: unary() };
    }
    return left;
  };

  const expr = (): ConditionAst => {
    let left = and();
    while (isKw(peek(), 'or')) {
      pos++;
      left = { kind: 'or', left, right: and() };
    }
    return left;
  };

  try {
    if (tokens.length === 0) return { ok: false, message: 'the condition is empty', offset: 0 };
    const ast = expr();
    if (pos < tokens.length) fail('unexpected text after the condition');
    return { ok: true, ast, variables: [...variables] };
  } catch (error) {
    if (error instanceof ConditionSyntaxError) return { ok: false, message: error.message, offset: error.offset };
    throw error;
  }
}

/** True when a variable holds a value (present, not null, not ""). */
export function isSetValue(value: unknown): boolean {
  return value !== undefined && value !== null && value !== '';
}

function resolve(operand: Operand, variables: Readonly<Record<string, unknown>>): unknown {
  return operand.kind === 'literal' ? operand.value : lookup(variables, operand.name);
}

function lookup(variables: Readonly<Record<string, unknown>>, name: string): unknown {
  if (Object.prototype.hasOwnProperty.call(variables, name)) return variables[name];
  // Dotted names read nested objects (`customer.tier`).
  let current: unknown = variables;
  for (const part of name.split('.')) {
    if (current === null || typeof current !== 'object' || !Object.prototype.hasOwnProperty.call(current, part)) return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

function asNumber(value: unknown): number | null {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  return null;
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  const na = asNumber(a);
  const nb = asNumber(b);
  if (na !== null && nb !== null && (typeof a === 'number' || typeof b === 'number')) return na === nb;
  return false;
}

/** Evaluate a parsed condition over session variables. Pure and total. */
export function evaluateCondition(ast: ConditionAst, variables: Readonly<Record<string, unknown>>): boolean {
  switch (ast.kind) {
    case 'and':
      return evaluateCondition(ast.left, variables) && evaluateCondition(ast.right, variables);
    case 'or':
      return evaluateCondition(ast.left, variables) || evaluateCondition(ast.right, variables);
    case 'not':
      return !evaluateCondition(ast.inner, variables);
    case 'is_set': {
      const set = isSetValue(lookup(variables, ast.name));
      return ast.negated ? !set : set;
    }
    case 'compare': {
      const left = resolve(ast.left, variables);
      const right = resolve(ast.right, variables);
      switch (ast.op) {
        case '=':
          return equal(left, right);
        case '!=':
          return !equal(left, right);
        default: {
          const nl = asNumber(left);
          const nr = asNumber(right);
          let cmp: number;
          if (nl !== null && nr !== null) cmp = nl - nr;
          else if (typeof left === 'string' && typeof right === 'string') cmp = left < right ? -1 : left > right ? 1 : 0;
          else return false;
          if (ast.op === '<') return cmp < 0;
          if (ast.op === '>') return cmp > 0;
          if (ast.op === '<=') return cmp <= 0;
          return cmp >= 0;
        }
      }
    }
    default:
      return assertNever(ast, 'condition');
  }
}

/**
 * Parse and evaluate in one step. A condition that does not parse evaluates to false (the
 * compiler refuses such definitions, so this only guards a hand-written published JSON).
 */
export function conditionHolds(source: string, variables: Readonly<Record<string, unknown>>): boolean {
  const parsed = parseCondition(source);
  return parsed.ok ? evaluateCondition(parsed.ast, variables) : false;
}
