"""trainplan.guard: keep a training loop alive through notices, failures and requeues.

Needs the torch extra (imported lazily). Three lines in a training loop::

    with Guard("ckpt/", every_steps=500) as guard:       # or "s3://bucket/run" (fsspec + s3fs)
        start = guard.resume(TrainState(model, optimizer))  # newest verified checkpoint, else 0
        for step in range(start, total):
            train_one_step(step)
            guard.step(step + 1)  # saves at the interval; on a notice saves, commits, exits 75
    # leaving the block commits the last save and gives SIGTERM/SIGUSR1 their old handlers

(or call ``guard.close()`` after the loop; at interpreter exit an unclosed Guard commits its
save in flight while the process group is still up.)

What it does:

* watches for a termination notice: SIGTERM and SIGUSR1 (torchrun forwards them to the workers;
  SLURM's ``--signal=B:USR1@s`` reaches the batch shell, see ``export.elastic``), and a cloud
  metadata URL polled in a thread (AWS ``spot/instance-action`` with an IMDSv2 token: 404 until
  a notice; GCP ``instance/preempted``: ``TRUE``; Azure Scheduled Events: a ``Preempt`` event;
  see ``_MetadataPoller``; failures are logged); any rank's notice is every rank's (an
  all-reduce per step);
* saves with ``torch.distributed.checkpoint`` (``async_save`` by default, one in flight at
  most; a blocking save on a notice) to a local folder or an fsspec URL, plus one small file per
  rank with the step, RNG states and ``per_rank`` objects (data-loader position). A kill loses
  at most ``every_steps`` steps, async or not (see ``Guard.step``);
* commits atomically: the shards and per-rank files first, then ``MANIFEST.json`` (file names,
  sizes and SHA-256, each rank hashing the files it wrote) written last by rank 0 in one atomic
  write (local: temp file + rename; object stores: one PUT). A checkpoint without a valid
  manifest is ignored on resume;
* resumes from the newest checkpoint whose files match their manifest by content (each rank
  checks its share, all ranks take the same step); a damaged one is logged with its file and
  the next newest tried, none verifying starts from step 0. Retention never keeps a checkpoint
  that failed verification and always keeps the newest verified one;
* exits with ``REQUEUE_EXIT_CODE`` (75, EX_TEMPFAIL) after a notice's save. torchrun turns it
  into 1, so first it writes the file ``$TRAINPLAN_REQUEUE_FILE`` names (the generated SLURM
  script requeues when it is there) and SIGTERMs its torchrun agent so that ``--max_restarts``
  does not start the workers again on a node that is about to go.
"""


from trainplan.guard.core import Guard
from trainplan.guard.store import MANIFEST, REQUEUE_EXIT_CODE, REQUEUE_FILE_ENV, TrainState, _Store

__all__ = ["Guard", "TrainState", "MANIFEST", "REQUEUE_EXIT_CODE", "REQUEUE_FILE_ENV", "_Store"]
