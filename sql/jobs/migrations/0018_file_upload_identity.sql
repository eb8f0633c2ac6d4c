-- 0018: what a symbol server's consumers need of each file written (issue #33): the code id
-- and code file of a .sym file's INFO CODE_ID record (a later lookup by code file and code
-- id), and, for a file that replaced another, the previous object's MD5, size and upload
-- (the overwrite rule's record). Expand only: nullable columns the release before this one
-- neither reads nor writes.
ALTER TABLE file_upload ADD COLUMN IF NOT EXISTS code_id text;
ALTER TABLE file_upload ADD COLUMN IF NOT EXISTS code_file text;
ALTER TABLE file_upload ADD COLUMN IF NOT EXISTS previous_md5 text;
ALTER TABLE file_upload ADD COLUMN IF NOT EXISTS previous_size bigint;
ALTER TABLE file_upload ADD COLUMN IF NOT EXISTS previous_upload_id bigint;
-- The dashboard's list of files replaced in the last day (few rows: a partial index).
CREATE INDEX IF NOT EXISTS file_upload_replaced_idx ON file_upload (created_at) WHERE "update";
