import Type from 'typebox';
import { setting } from './serving.settings.js';

/** The settings of scheduled backups of the SQLite file (docs/backups.md). */
export const BACKUP_SETTINGS = {
  backupDir: setting(
    Type.String({
      default: '',
      maxLength: 4096,
      'x-default-text': '(off)',
      description:
        'folder where `rowi serve` keeps backups of the SQLite file, scheduled and started by `POST /v1/backups` (each checked and with its SHA-256 beside it); empty: no scheduled backups, and the backup routes answer 409',
    }),
    'ROWI_BACKUP_DIR',
  ),
  backupInterval: setting(
    Type.Integer({
      minimum: 60,
      maximum: 31_536_000,
      default: 86_400,
      description:
        'seconds between scheduled backups into `ROWI_BACKUP_DIR` (the first one an interval after the newest backup in the folder, or after start when it has none)',
    }),
    'ROWI_BACKUP_INTERVAL',
  ),
  backupKeep: setting(
    Type.Integer({
      minimum: 1,
      maximum: 1000,
      default: 7,
      description:
        'backups kept in `ROWI_BACKUP_DIR` (scheduled or not); older ones are deleted after each good backup',
    }),
    'ROWI_BACKUP_KEEP',
  ),
};
