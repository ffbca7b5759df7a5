export { compileProject, normalizeSeedMemoryItems } from './compile';
export type { CompiledProject, CompileResult, SourceFile } from './compile';
export { DiagnosticCode, Severity, formatDiagnostic, hasErrors } from './diagnostics';
export type { Diagnostic } from './diagnostics';
export { LOAN_EXAMPLE_YAML } from './examples';
