"""The upload's fields: what a client may send beside its files, and the server reads.

One home for both ends: ``app.uploads.service`` takes these names (and says where each goes
in the native run), and the client has a flag for each.
"""

# Run fields an upload may set (form fields or query parameters).
RUN_FIELDS = (
    "key",
    "project",
    "trigger",
    "tier",
    "commit",
    "branch",
    "base_commit",
    "default_branch",
    "url",
    "started_at",
    "finished_at",
)
# A shard of a run (its name) and how many shards the run has.
SHARD_FIELDS = ("shard", "shards")
# Upload field -> the native machine field it sets.
MACHINE_FIELDS = {"machine": "name", "device": "device", "arch": "arch", "hostname": "hostname"}
ENVIRONMENT_FIELDS = ("channel", "torch", "triton", "python", "cuda", "hip", "driver")
# What a file may not say itself, given for all of the upload's files.
HINT_FIELDS = ("suite", "config", "precision", "mode", "device")
# Every field an uploader may set, each once.
METADATA = tuple(
    dict.fromkeys((*RUN_FIELDS, *SHARD_FIELDS, *MACHINE_FIELDS, *ENVIRONMENT_FIELDS, *HINT_FIELDS))
)
# What an uploading tool adds: the machine's name when neither the upload nor the files give
# one, and where its fields came from (a JSON object of field -> source).
DEFAULT_MACHINE = "default_machine"
PROVENANCE = "provenance"
UPLOAD_FIELDS = (*METADATA, DEFAULT_MACHINE, PROVENANCE)
