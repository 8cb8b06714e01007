/** Types of scripts/mutation-scope.mjs (plain JavaScript: stryker.config.mjs loads it without tsx). */
export function functionRanges(file: string, names: readonly string[]): string[];
