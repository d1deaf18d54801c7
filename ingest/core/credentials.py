"""What to set when a cloud SDK finds no credentials: the variables and files its default chain reads.

A source that fails with boto3's ``NoCredentialsError`` (or google-auth's ``DefaultCredentialsError``)
gets this sentence after its error, so the ledger and the command line say what to set, not only
"Unable to locate credentials". Matched by the exception's class name: no SDK is imported here.
"""

from __future__ import annotations

AWS_CHAIN = (
    "boto3 looks in AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), AWS_PROFILE with "
    "~/.aws/credentials and ~/.aws/config (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE), "
    "AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, SSO (`aws sso login`), then an instance or pod role"
)
GOOGLE_CHAIN = (
    "google-auth looks in GOOGLE_APPLICATION_CREDENTIALS (a key file), the source's credentials_file, "
    "`gcloud auth application-default login` (~/.config/gcloud/application_default_credentials.json), "
    "then the metadata server of a Google Cloud VM"
)
HINTS = {
    "NoCredentialsError": AWS_CHAIN,
    "PartialCredentialsError": AWS_CHAIN,
    "NoAuthTokenError": AWS_CHAIN,
    "DefaultCredentialsError": GOOGLE_CHAIN,
}
DOCTOR = "`gpufinops doctor` checks each source's credentials"


def hint(exc: BaseException) -> str | None:
    """The sentence to add for a missing credential anywhere in ``exc``'s chain, else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for cls in type(current).__mro__:
            if cls.__name__ in HINTS:
                return f"no credentials found: {HINTS[cls.__name__]}; {DOCTOR}"
        current = current.__cause__ or current.__context__
    return None
