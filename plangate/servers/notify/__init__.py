"""Approvals delivered where the approver works (issue 51): the approval page's delivery loop
sends each card it finds in the runs index to the channels the deployment names (an e-mail over
SMTP, a Slack-compatible webhook), once per card and channel, retried and recorded in
``plangate.deliveries``; a chat's signed button click comes back to the page's
``/chat/actions`` (``servers.page.chat``).

The rooms: ``settings`` (the environment, checked), ``message`` (a card in words, an e-mail, a
chat message), ``channels`` (SMTP, HTTP), ``loop`` (claim, send, record)."""
