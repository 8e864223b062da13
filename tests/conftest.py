"""Test-wide settings."""

from hypothesis import HealthCheck, settings

# Property tests build histories of thousands of messages: on a loaded 2-core CI machine a
# single example can take longer than hypothesis's default 200 ms deadline, which would make
# the suite flaky without saying anything about the code. Correctness is what they check;
# speed is measured in bench/.
settings.register_profile("hookloop", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("hookloop")
