// Type definitions for fencelock/sql: fenced writes to PostgreSQL through
// node-postgres (`pg`).

/// <reference types="node" />

import type { Lease } from './index.js'

/** What fencedUpdate needs of a pg Client, Pool or PoolClient. */
export interface Queryable {
  query(config: { text: string; values: unknown[]; rowMode?: 'array' }): Promise<{ rowCount: number | null; rows: any[] }>
}

export interface FencedUpdateOptions {
  /** The columns (and values) that pick the row: `WHERE col = value AND ...`. */
  where: Record<string, unknown>
  /** A Lease (its fence and lock name), or a bare fence. */
  fence: Lease | bigint
  /** The column holding the last accepted fence (default `'fence'`; `bigint` in the table). */
  fenceColumn?: string
}

/**
 * Update the rows of `table` matching `where` with `values`, only if none
 * recorded a fence newer than `fence`, and record `fence`. Resolves to the
 * rows updated (0: `where` matched none); rejects with StaleFenceError when a
 * newer fence is recorded (nothing written).
 */
export declare function fencedUpdate(
  db: Queryable,
  table: string | readonly string[],
  values: Record<string, unknown>,
  options: FencedUpdateOptions,
): Promise<number>
