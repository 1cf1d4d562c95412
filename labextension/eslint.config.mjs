// Lint rules for the panel's TypeScript (flat config, ESLint 9).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['lib/', 'test-build/', 'node_modules/', '../mlp_magic/labextension/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.ts', 'test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { args: 'none' }],
      eqeqeq: 'error',
      curly: 'error',
      'prefer-const': 'error'
    }
  }
);
