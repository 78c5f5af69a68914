"""Reading agent traces: chat message and tool validation (`messages`), and trace formats (`openai_chat`)."""
