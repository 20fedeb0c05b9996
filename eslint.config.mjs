import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bin/**', 'data/**', 'coverage/**', '*.js', '*.mjs', 'test/**/*.mjs', 'scripts/*.mjs', 'src/upload/static/**', 'src/console/static/**', 'src/openapi/static/**'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      // tsc does not rewrite path aliases, so `src/...` imports would fail at run time from dist/.
      'no-restricted-imports': ['error', { patterns: [{ group: ['src/*'], message: 'Use a relative import.' }] }],
      eqeqeq: 'error',
      curly: 'error',
    },
  },
  {
    files: ['test/**/*.ts', '**/*.spec.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-unsafe-member-access': 'off', '@typescript-eslint/no-unsafe-assignment': 'off' },
  },
);
