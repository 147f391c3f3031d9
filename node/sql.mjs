// ESM entry of fencelock/sql.
import cjs from './sql.js'

export const { fencedUpdate } = cjs
