import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bin/**', 'data/**', 'coverage/**', '*.js', '!jest.config.js', '*.mjs', 'test/**/*.mjs', 'scripts/*.mjs', 'src/upload/static/**', 'src/console/static/**', 'src/openapi/static/**'] },
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
  {
    // CommonJS that Jest and CI load as they are (the test passes, their sequencer and reporter).
    files: ['test/**/*.js', '.ci/**/*.js', 'jest.config.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'commonjs',
      globals: { require: 'readonly', module: 'writable', process: 'readonly', console: 'readonly', __dirname: 'readonly' },
    },
    rules: {
      ...tseslint.configs.disableTypeChecked.rules,
      '@typescript-eslint/no-require-imports': 'off',
      eqeqeq: 'error',
      curly: 'error',
    },
  },
);
