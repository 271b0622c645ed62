"""benchwatch's light client: upload result files from CI and gate pull requests on them.

It needs httpx and nothing of the server's; the server's ``benchwatch upload`` runs it too.
"""
