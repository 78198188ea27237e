export { registerConsole } from './console.ts';
