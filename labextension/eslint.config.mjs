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
      'prefer-const': 'error',
      // The house's sizes (as tests/unit/test_layout.py holds the Python to them).
      'max-lines': ['error', { max: 400 }],
      'max-lines-per-function': ['error', { max: 50 }]
    }
  },
  // The layers of src/: model (pure), live (the connection), view (the DOM), index (the plugin);
  // each imports only from the layers before it, so the model stays testable without a browser.
  {
    files: ['src/model/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['../live/*', '../view/*', '../index'], message: 'src/model is pure: it imports only from src/model.' },
          { group: ['@jupyterlab/*', '@lumino/*'], message: 'src/model is pure: no JupyterLab, no Lumino, no DOM.' }
        ]
      }]
    }
  },
  {
    files: ['src/live/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ group: ['../view/*', '../index'], message: 'src/live draws nothing: it imports from src/model and src/live.' }]
      }]
    }
  }
);
