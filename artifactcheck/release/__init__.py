"""Where the expected release comes from: manifest files, URL templates, ConfigMaps and OCI
registries, each read and indexed by the version it declares.
"""
