"""What an ArtifactCheck's author may ask of the controller: admission of a check and where
the controller may connect for it. Pure policy, no I/O.
"""
