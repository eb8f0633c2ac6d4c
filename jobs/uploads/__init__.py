"""The symbol-upload queue: archives in the inbox bucket -> symbol files in S3.

One module per concern: ``options`` (the job's options, declared once), ``validation``
(central-directory rules, pure), ``archive`` (streaming members with isal), ``storage``
(the S3 calls), ``store`` (the SQL), ``worker`` (claiming and outcomes), ``process`` (one
upload's stages, in order: ``arrival``, ``existence``, ``verify``, ``publish``), ``app``
(the crontabber job), ``cli`` (``python -m jobs.uploads enqueue|reprocess|demo|drain``).
Heavy libraries (boto3, isal, tqdm) are imported only when used.
"""

from .app import ProcessUploadsCronApp

__all__ = ["ProcessUploadsCronApp"]
