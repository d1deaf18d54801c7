"""The weekly e-mailed report: ``render`` (pure: HTML + PNG charts + CSV) then ``deliver`` (SMTP, a file)."""
