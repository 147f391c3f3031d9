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
 * Update with `values` the rows of `table` matching `where` (meant to pick
 * one row) whose recorded fence is not newer than `fence`, recording `fence`.
 * Resolves to the rows updated (0: `where` matched none); rejects with
 * StaleFenceError when no row was updated because a newer fence is recorded.
 */
export declare function fencedUpdate(
  db: Queryable,
  table: string | readonly string[],
  values: Record<string, unknown>,
  options: FencedUpdateOptions,
): Promise<number>
