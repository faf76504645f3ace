from openslob.model.secrets import hide_passwords_from_ps

hide_passwords_from_ps()  # first: before the commands' modules load (model.secrets)

from openslob.cli import main  # noqa: E402

main()
