"""The symbol-upload queue (issue #4): archives in the inbox bucket -> symbol files in S3.

One module per concern: ``validation`` (central-directory rules, pure), ``archive``
(streaming members with isal), ``existence`` and ``storage`` (S3), ``process`` (one
upload), ``store`` (the SQL), ``worker`` (claiming and outcomes), ``app`` (the
crontabber job), ``cli`` (``python -m jobs.uploads enqueue|reprocess|demo``).
Heavy libraries (boto3, isal, tqdm) are imported only when used.
"""

from .app import ProcessUploadsCronApp

__all__ = ["ProcessUploadsCronApp"]
