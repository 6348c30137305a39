"""Azure Blob Storage and Data Lake Storage through ``pyarrow.fs.AzureFileSystem``: the account
from the URL, credentials and endpoints from the environment Azure's tools read
(``AZURE_STORAGE_CONNECTION_STRING``, ``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``),
an emulator's path-style endpoint included."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["azure_account", "azure_filesystem", "azure_settings", "connection_string"]


def azure_account(scheme: str, authority: str) -> tuple[str, str, str]:
    """(container, account, endpoint suffix) of ``container@account.dfs.core.windows.net``."""
    container, at, host = authority.rpartition("@")
    labels = host.split(".")
    if not at or not container or len(labels) < 3 or labels[1] not in ("dfs", "blob"):
        raise ValueError(
            f"{scheme}://{host}: an Azure storage URL names its container and account as "
            f"{scheme}://CONTAINER@ACCOUNT.dfs.core.windows.net/PATH (the endpoint of an "
            f"emulator comes from AZURE_STORAGE_CONNECTION_STRING's BlobEndpoint)"
        )
    return container, labels[0], ".".join(labels[2:])


def azure_settings(scheme: str, authority: str, env) -> tuple:
    """(account, account key, SAS token, blob scheme, blob authority, dfs scheme, dfs authority)
    for the account a URL names, from ``AZURE_STORAGE_CONNECTION_STRING`` (when it is for that
    account), else ``AZURE_STORAGE_ACCOUNT_KEY`` / ``AZURE_STORAGE_SAS_TOKEN`` (when
    ``AZURE_STORAGE_ACCOUNT`` names no other account), and the URL's endpoint suffix; no key and
    no token: Azure's default credential chain."""
    _, account, suffix = azure_account(scheme, authority)
    settings = connection_string(env.get("AZURE_STORAGE_CONNECTION_STRING", ""))
    if settings.get("accountname", account) != account:
        settings = {}
    key, sas = settings.get("accountkey"), settings.get("sharedaccesssignature")
    if not key and not sas and env.get("AZURE_STORAGE_ACCOUNT", account) == account:
        key = env.get("AZURE_STORAGE_ACCOUNT_KEY") or None
        sas = None if key else env.get("AZURE_STORAGE_SAS_TOKEN") or None
    protocol = settings.get("defaultendpointsprotocol", "https")
    suffix = settings.get("endpointsuffix", suffix)
    blob = ("https" if protocol not in ("http", "https") else protocol, f".blob.{suffix}")
    if "blobendpoint" in settings:
        blob = azure_endpoint(settings["blobendpoint"], account, "BlobEndpoint")
    if "dfsendpoint" in settings:
        dfs = azure_endpoint(settings["dfsendpoint"], account, "DfsEndpoint")
    elif blob[1].startswith("."):  # account.blob.<suffix>: the same account's dfs endpoint
        dfs = (blob[0], blob[1].replace(".blob.", ".dfs.", 1))
    else:  # an emulator's blob endpoint, http://host:port/account, serves both
        dfs = blob
    return (account, key, sas, *blob, *dfs)


def connection_string(text: str) -> dict[str, str]:
    """An Azure storage connection string's settings, by lower-case name."""
    settings = {}
    for item in text.split(";"):
        name, eq, value = item.strip().partition("=")
        if eq and name.strip():
            settings[name.strip().lower()] = value.strip()
    return settings


def azure_endpoint(url: str, account: str, name: str) -> tuple[str, str]:
    """(scheme, authority as Arrow takes it) of an endpoint: ``.blob.core.windows.net`` for
    ``https://ACCOUNT.blob.core.windows.net``, ``host:port`` for an emulator's path-style
    ``http://host:port/ACCOUNT``."""
    parts = urlsplit(url.strip())
    path = parts.path.strip("/")
    if parts.scheme in ("http", "https") and parts.netloc and not parts.query:
        if path == account:
            return parts.scheme, parts.netloc
        if not path and parts.netloc.lower().startswith(account.lower() + "."):
            return parts.scheme, parts.netloc[len(account) :]
    raise ValueError(
        f"AZURE_STORAGE_CONNECTION_STRING's {name} is neither https://{account}.blob.SUFFIX "
        f"nor an emulator's http://HOST:PORT/{account}"
    )


def azure_filesystem(account, key, sas, blob_scheme, blob, dfs_scheme, dfs):
    from pyarrow import fs

    credentials = {"account_key": key} if key else {"sas_token": sas} if sas else {}
    return fs.AzureFileSystem(account, blob_storage_authority=blob, blob_storage_scheme=blob_scheme,
                              dfs_storage_authority=dfs, dfs_storage_scheme=dfs_scheme,
                              **credentials)  # fmt: skip
