import Type, { type Static } from 'typebox';
import { MAX_LIMIT, pageSchema } from '../../http/paging.js';
import { Nullable, Timestamp } from '../../http/schemas.js';

/** Backups of the SQLite file in ROWI_BACKUP_DIR, as their manifests (`FILE.json`) record them (docs/backups.md). */
const Count = (description: string) => Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description });

/** A backup's file name: no folder, no leading dot (what the schedule and POST /v1/backups write: rowi-TIME.sqlite). */
export const BACKUP_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$';

export const BackupSchema = Type.Object(
  {
    file: Type.String({ maxLength: 255, description: 'the file name in ROWI_BACKUP_DIR' }),
    bytes: Count("the file's size"),
    sha256: Type.String({
      pattern: '^[0-9a-f]{64}$',
      description: "the file's SHA-256 (hex), as recorded when it was taken",
    }),
    taken_at: Type.String({ ...Timestamp, description: 'when its snapshot was taken (its start)' }),
    ms: Count('how long taking and checking it took, in milliseconds'),
    schema: Nullable(
      Type.String({ maxLength: 200, description: "the database's schema version: the last migration the copy has" }),
    ),
    rows: Type.Record(Type.String({ maxLength: 200 }), Count('rows'), {
      description: 'the rows of each table of the copy, counted when it was checked',
    }),
    rowi: Type.String({ maxLength: 100, description: 'the version of rowi that took it' }),
    url: Type.String({ maxLength: 300, description: 'the path of this backup in the API' }),
  },
  { additionalProperties: false, title: 'Backup', xml: { name: 'backup' } },
);
export type Backup = Static<typeof BackupSchema>;

export const BackupPageSchema = pageSchema(BackupSchema, 'backups');

export const BackupNameParams = Type.Object({
  name: Type.String({
    pattern: BACKUP_NAME_PATTERN,
    maxLength: 255,
    description: 'the file name of the backup (rowi-20261126T203000.123Z.sqlite)',
  }),
});

export const BackupListQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: MAX_LIMIT, default: 50, description: `page size, 1–${MAX_LIMIT}` }),
    ),
    cursor: Type.Optional(
      Type.String({ minLength: 1, maxLength: 2048, description: 'next_cursor of the previous page' }),
    ),
  },
  { additionalProperties: false },
);

/** The problems a failed backup stands for: each a 5xx of the catalogue (errors.ts), as a request that failed so would be answered. */
export const BACKUP_FAILURES = {
  'insufficient-storage': 507,
  'service-unavailable': 503,
  'internal-error': 500,
} as const;
export type BackupFailure = keyof typeof BACKUP_FAILURES;

/** How a backup operation ended: in words, on success the backup it wrote, on failure the 5xx problem it stands for. */
export const BackupOutcomeSchema = Type.Object(
  {
    detail: Type.String({ maxLength: 2000, description: 'how it ended, in words (on failure: why)' }),
    backup: Type.Union([BackupSchema, Type.Null()], {
      description: 'the backup written (file, size, SHA-256, schema version, row counts); null when it failed',
    }),
    problem: Type.Union(
      [
        Type.Object(
          {
            type: Type.Union(
              Object.keys(BACKUP_FAILURES).map((type) => Type.Literal(type)),
              { description: 'the problem type, as in /problems/{type}' },
            ),
            status: Type.Integer({ minimum: 500, maximum: 599, description: "the problem's HTTP status" }),
          },
          { additionalProperties: false },
        ),
        Type.Null(),
      ],
      {
        description:
          'when it failed, the server error it stands for: 507 insufficient-storage (the disk is full), 503 service-unavailable (rowi stopped or was killed before the backup was whole: start another), 500 internal-error (anything else: `detail` says what); null when it succeeded or was cancelled',
      },
    ),
  },
  { additionalProperties: false },
);
