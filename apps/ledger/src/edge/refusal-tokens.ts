/** Injection tokens of the ledger's two refused-letter recorders (`RefusedLetters`): agent edge messages, rejected ledger commands. */
export const EDGE_REFUSED_LETTERS = Symbol('EDGE_REFUSED_LETTERS');
export const COMMAND_REFUSED_LETTERS = Symbol('COMMAND_REFUSED_LETTERS');
